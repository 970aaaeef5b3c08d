"""Model runners on nbxtensor operators: the BERT encoder (:mod:`.bert`) and sentence-transformers folders
(:mod:`.sentence`); packaged model files are found with :mod:`.weights`.

Submodules are imported on use (``from nbxtensor.models.sentence import SentenceEncoder``), so importing this
package costs nothing.
"""
