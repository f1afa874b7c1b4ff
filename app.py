"""attsvm explorer (placeholder until the app lands)."""
import streamlit as st

st.title("attsvm")
