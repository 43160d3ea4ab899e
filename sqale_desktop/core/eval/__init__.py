"""Evaluation: question sets, execution match, reports."""
