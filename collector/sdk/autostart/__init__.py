"""Folder put on PYTHONPATH for the no-code path; holds only sitecustomize.py."""
