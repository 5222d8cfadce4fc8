#!/usr/bin/env python3
"""Computes the headers hmac-openai sends, independently of the C code, for writing cases.

    python3 sign.py SECRET NOW_UNIX_MS BODY_TEXT

prints the x-signature-timestamp and x-signature values for that body (the exact bytes sent).
"""
import hashlib
import hmac
import sys

secret, now_ms, body = sys.argv[1], int(sys.argv[2]), sys.argv[3]
timestamp = str(now_ms // 1000)
mac = hmac.new(secret.encode(), (timestamp + "." + body).encode(), hashlib.sha256).hexdigest()
print(f"x-signature-timestamp: {timestamp}")
print(f"x-signature: sha256={mac}")
