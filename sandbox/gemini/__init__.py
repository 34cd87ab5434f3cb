"""The Gemini API: ``generateContent``, ``streamGenerateContent``, embeddings and models.

Owns Gemini's request schema (contents, parts, function declarations, generation config), its
response and stream shapes, and its error bodies.
"""
