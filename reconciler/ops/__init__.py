"""Read models and actions for the operations dashboard, shared with the CLI and the scheduler.

Every function takes a ``Connection`` (the caller owns the transaction), aggregates in SQL and returns
small frozen values; Streamlit pages only render what these return.
"""
