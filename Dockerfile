# One image for every service of docker-compose.yml: the Dask scheduler (`dask scheduler`),
# the workers (`dask worker`), Jupyter Lab (`jupyter lab`) and the command line (`dxrf`).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# the project: pyproject.toml installs workflows/ as dxrf.workflows
WORKDIR /opt/dxrf
COPY pyproject.toml README.md ./
COPY dxrf ./dxrf
COPY workflows ./workflows
# the project with its workflows extra (matplotlib for the figures of notebooks and workflows, dask-ml),
# plus the Dask dashboard (bokeh) and the notebook server (jupyterlab; nbclient runs
# notebooks headless, e.g. `docker compose run --rm notebook jupyter execute ...`)
RUN pip install . ".[workflows]" "bokeh>=3.1" "jupyterlab>=4" nbclient ipykernel \
    && dask --version && dxrf --help > /dev/null

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
