"""Weekly efficiency reports (HTML, PDF, Markdown) and their delivery."""
