"""Jinja2 templates of the HTML report, shipped as package data."""
