"""Property-based fuzzing: the analyzer, the addon's hooks and the report's escaping and redaction.

The tests here are bounded (a fixed seed, a few hundred examples in all) so that `make test` runs them in
well under a minute; `tests/fuzz/long_fuzz.py --seconds N --seed S` runs the same properties for longer.
"""
