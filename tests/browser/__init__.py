"""Browser-level tests: JupyterLab and archived reports in Debian's Chromium (marker ``browser``)."""
