"""The operations dashboard (Streamlit). Pages only render; every query and action lives in
``reconciler`` (``reconciler.ops`` and the action modules) and is shared with the CLI."""
