"""The dashboard's pages, one file each, routed by `dashboard/app.py` through `st.navigation`."""
