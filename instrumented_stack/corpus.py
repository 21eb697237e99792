"""The small corpus shipped with the stack: a product catalogue and support policy documents.

Files (package data, under ``instrumented_stack/data/``):

- ``catalogue.json``: ``{"products": [{"sku", "name", "category", "price_eur", "stock", "description"}]}``,
  240 synthetic products (SKUs ``SKU-0001`` ... ``SKU-0240``); the catalogue tool serves it.
- ``policies.json``: ``{"documents": [{"id", "title", "text"}]}``, 28 support policy documents.

The retriever indexes both (:func:`load_documents`); the tokenizer is trained on their text.
Nothing is fetched at run time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
CATALOGUE_FILE = DATA_DIR / "catalogue.json"
POLICIES_FILE = DATA_DIR / "policies.json"


@dataclass(frozen=True, slots=True)
class Product:
    """One catalogue entry; ``price_eur`` in euro, ``stock`` in units."""

    sku: str
    name: str
    category: str
    price_eur: float
    stock: int
    description: str


@dataclass(frozen=True, slots=True)
class Document:
    """One retrievable document: a policy or a product's description (``sku`` set for products)."""

    id: str
    title: str
    text: str
    sku: str | None = None


@cache
def load_catalogue() -> tuple[Product, ...]:
    """Every product of ``catalogue.json``, in file order. Raises ``OSError``/``KeyError`` on a broken file."""
    payload = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))
    return tuple(Product(**entry) for entry in payload["products"])


@cache
def load_documents() -> tuple[Document, ...]:
    """Policy documents, then one document per product (title = name, text = description)."""
    payload = json.loads(POLICIES_FILE.read_text(encoding="utf-8"))
    policies = [Document(id=d["id"], title=d["title"], text=d["text"]) for d in payload["documents"]]
    products = [
        Document(id=p.sku, title=p.name, text=f"{p.sku} {p.name}. {p.description} Price {p.price_eur} euro.", sku=p.sku)
        for p in load_catalogue()
    ]
    return (*policies, *products)


def corpus_texts() -> list[str]:
    """Every text of the corpus (titles and bodies), the tokenizer's training data."""
    return [text for doc in load_documents() for text in (doc.title, doc.text)]
