"""``sampledlm serve``: any model (or mixture) as an HTTP JSON scoring service for decoders.

- :mod:`.app`: the aiohttp application (endpoints, error answers, graceful stop) and :class:`~.app.Server`;
- :mod:`.batcher`: dynamic batching of concurrent requests into one model call (Schwenk 2007's bunch mode
  across clients), the model in one worker thread;
- :mod:`.engine`: the model work of a batch (sentence scores through :mod:`sampledlm.use.score`, next-word
  log-probabilities, top-k);
- :mod:`.limits`: the limits and the checks of a request body;
- :mod:`.client`: a standard-library Python client.

The server library is aiohttp (an extra: ``pip install 'sampledlm[serve]'``); importing this package
does not import it, only :mod:`.app` does.
"""
