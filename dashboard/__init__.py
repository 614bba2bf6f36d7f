"""Streamlit operations dashboard (see issue #5). Pages only render; logic lives in ``reconciler``."""
