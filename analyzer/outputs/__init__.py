"""The analysis as records: the export contract (JSON, CSV, pandas), OpenTelemetry spans and HAR, and
``analyze()``, the whole analysis at once.
"""
