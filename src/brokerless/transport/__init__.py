"""Transports: how pipes are made between a socket and its peers (inproc now)."""
