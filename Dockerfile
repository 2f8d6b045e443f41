# One image for the scheduler, the workers, the notebook server and the CLI.
FROM python:3.11-slim
WORKDIR /opt/dxrf
COPY pyproject.toml README.md ./
COPY dxrf ./dxrf
COPY workflows ./workflows
COPY notebooks ./notebooks
RUN pip install --no-cache-dir ".[test]" jupyterlab nbclient
ENV DXRF_DATA_DIR=/data/shared
WORKDIR /work
