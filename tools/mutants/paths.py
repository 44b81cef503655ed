"""The tests that several record files name."""

REFERENCE_TESTS = ("tests/attention/test_against_references.py",)
MULTIPROCESS = (
    "tests/train/test_multiprocess.py::test_processes_read_their_rows_stop_together_and_resume_on_other_process_counts"
)
PACKED_TESTS = "tests/attention/test_packed_sequences.py"
PER_FEATURE_TESTS = ("tests/attention/test_per_feature_decay.py",)
HYBRID_TESTS = "tests/models/test_delta_window_hybrid.py"
QWEN3_TESTS = "tests/models/test_pretrained.py"
