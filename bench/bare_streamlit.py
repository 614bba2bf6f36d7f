"""The floor of a Streamlit page for bench/browser.py: a title and one Plotly chart, no queries."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
st.title("Floor")
st.plotly_chart(go.Figure(go.Bar(x=list(range(96)), y=[i % 7 for i in range(96)])))
