# Static binaries in a minimal image, run as a non-root user.
#   docker build -t leasehold .
#   docker run -e DATABASE_URL=postgres://… -p 8080:8080 leasehold
#   docker run -e DATABASE_URL=postgres://… leasehold worker --queues default
# deploy/compose.yaml runs it with PostgreSQL and Caddy.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# docker build --build-arg VERSION=v1.2.0 sets what --version prints.
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=auto \
      -ldflags="-s -w -X github.com/leasehold/leasehold/cmd/internal/cli.version=${VERSION}" \
      -o /out/ ./cmd/server ./cmd/worker \
 && mkdir -p /data/artifacts

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/server /out/worker /usr/local/bin/
COPY --from=build --chown=65532:65532 /data /var/lib/leasehold
ENV LEASEHOLD_ADDR=0.0.0.0:8080 \
    LEASEHOLD_ARTIFACTS=/var/lib/leasehold/artifacts
WORKDIR /var/lib/leasehold
USER 65532:65532
EXPOSE 8080
# Not an ENTRYPOINT, so "docker run leasehold worker …" runs the worker.
CMD ["server"]
