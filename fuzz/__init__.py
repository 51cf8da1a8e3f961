"""Fuzz targets and their runner (see run.py); the saved corpora are in corpus/."""
