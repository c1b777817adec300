"""Running analyzers: windows and the schedule (schedule), one window's run (runner), where the
results land (results), and the two ways to drive it: in the server (embedded) or on Celery
(celery_app).
"""
