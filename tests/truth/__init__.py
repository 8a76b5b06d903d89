"""The labelled truth corpus: scenarios recorded through real processes, scored against the analyzer."""
