# One image for every service of docker-compose.yml: the Dask scheduler (`dask scheduler`),
# the workers (`dask worker`), Jupyter Lab (`jupyter lab`) and the command line (`dxrf`).
#
# Build arguments:
#   BASE_IMAGE  an image with Python 3.11 whose `python` and `pip` install for every user
#               (default python:3.11-slim; deploy/build-local-images.sh builds one from
#               Debian packages where no container registry can be reached)
#   WHEELS      non-empty: install only from the wheels in deploy/wheels/ (pip --no-index),
#               built there beforehand by deploy/build-local-images.sh; empty: from PyPI
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
ARG WHEELS=

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# the project: pyproject.toml installs workflows/ as dxrf.workflows
WORKDIR /opt/dxrf
COPY pyproject.toml README.md ./
COPY dxrf ./dxrf
COPY workflows ./workflows
# holds only a .gitignore unless wheels were built there (they stay in this layer)
COPY deploy/wheels/ /tmp/wheels/
# the project with its workflows extra (matplotlib for the figures of notebooks and workflows, dask-ml),
# plus the Dask dashboard (bokeh) and the notebook server (jupyterlab; nbclient runs
# notebooks headless, e.g. `docker compose run --rm notebook jupyter execute ...`)
RUN pip install ${WHEELS:+--no-index --find-links /tmp/wheels} \
        . ".[workflows]" "bokeh>=3.1" "jupyterlab>=4" nbclient ipykernel \
    && rm -rf /tmp/wheels && dask --version && dxrf --help > /dev/null

# an unprivileged user; /work is the shared volume of the compose file, seeded with the
# notebooks on first start (a named volume copies the image's /work when it is empty)
RUN useradd --create-home --uid 1000 dxrf && mkdir -p /work/notebooks /work/tmp && chown -R dxrf:dxrf /work
COPY --chown=dxrf:dxrf notebooks/ /work/notebooks/
USER dxrf
WORKDIR /work
ENV DXRF_DATA_DIR=/data \
    DXRF_WORK_DIR=/work

EXPOSE 8786 8787 8888
CMD ["dxrf", "--help"]
