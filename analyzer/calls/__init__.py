"""One call at a time: requests paired with their answers, and each call judged (its outcome, flags
and evidence, the timeout anatomy of a call without an answer). ``live`` applies the same judgement to
one exchange as it ends, for the recorder.
"""
