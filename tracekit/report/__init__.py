"""Turning results (traces, verification, comparisons) into text for people."""
