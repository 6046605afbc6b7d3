#!/usr/bin/env bash
# A real Kubernetes control plane for the tests: etcd and kube-apiserver only (no scheduler,
# controller-manager or kubelet), TLS with openssl-made certificates, RBAC authorization.
#
#   control-plane.sh start   DIR BIN_DIR VERSION   # certs, etcd, kube-apiserver; waits for /readyz
#   control-plane.sh restart DIR                   # kube-apiserver only (breaks every watch)
#   control-plane.sh stop    DIR
#
# DIR gets admin.kubeconfig (system:masters), env (ports, for the tests) and the logs.
set -euo pipefail
cmd=${1:?start|restart|stop}
dir=${2:?state directory}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

certs() {
  local c=$dir/pki
  mkdir -p "$c"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=tessera-test-ca" \
    -keyout "$c/ca.key" -out "$c/ca.crt" 2>/dev/null
  # The serving certificate names 127.0.0.1 and the in-cluster service names.
  printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >"$c/server.ext"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$c/server.key" -out "$c/server.csr" 2>/dev/null
  openssl x509 -req -in "$c/server.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" -CAcreateserial -days 2 \
    -extfile "$c/server.ext" -out "$c/server.crt" 2>/dev/null
  # The admin client: the system:masters group is authorized before RBAC is consulted.
  printf 'extendedKeyUsage=clientAuth\n' >"$c/client.ext"
  openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=admin" -keyout "$c/admin.key" -out "$c/admin.csr" 2>/dev/null
  openssl x509 -req -in "$c/admin.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" -CAcreateserial -days 2 \
    -extfile "$c/client.ext" -out "$c/admin.crt" 2>/dev/null
  # Service-account token signing key (TokenRequest needs no controller-manager).
  openssl genrsa -out "$c/sa.key" 2048 2>/dev/null
  openssl rsa -in "$c/sa.key" -pubout -out "$c/sa.pub" 2>/dev/null
}

start_apiserver() {
  # shellcheck disable=SC1091
  . "$dir/env"
  local extra=()
  # MutatingAdmissionPolicy: beta (off by default) in 1.34 and 1.35, GA (v1, on) from 1.36.
  case $KUBE_VERSION in
    v1.34.*|v1.35.*)
      extra+=(--feature-gates=MutatingAdmissionPolicy=true
              --runtime-config=admissionregistration.k8s.io/v1beta1=true) ;;
  esac
  # ServiceAccount admission is off: it needs each namespace's "default" account, which only
  # the controller-manager (not run here) creates. No endpoint reconciler: it refuses a
  # loopback advertise address, and nothing here reaches the API through a Service.
  "$BIN_DIR/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --tls-cert-file="$dir/pki/server.crt" --tls-private-key-file="$dir/pki/server.key" \
    --client-ca-file="$dir/pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$dir/pki/sa.pub" --service-account-signing-key-file="$dir/pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC \
    --endpoint-reconciler-type=none \
    --disable-admission-plugins=ServiceAccount \
    "${extra[@]}" \
    >>"$dir/kube-apiserver.log" 2>&1 &
  echo $! >"$dir/kube-apiserver.pid"
  local i
  for i in $(seq 1 240); do
    if curl -sf --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
      "https://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1; then
      echo "kube-real: kube-apiserver $KUBE_VERSION ready on :$API_PORT after $((i / 4)) s"
      return 0
    fi
    if ! kill -0 "$(cat "$dir/kube-apiserver.pid")" 2>/dev/null; then
      tail -30 "$dir/kube-apiserver.log" >&2
      echo "kube-real: kube-apiserver exited" >&2
      return 1
    fi
    sleep 0.25
  done
  tail -30 "$dir/kube-apiserver.log" >&2
  echo "kube-real: kube-apiserver not ready after 60 s" >&2
  return 1
}

stop_pid() {
  local f=$1
  [ -f "$f" ] || return 0
  local pid
  pid=$(cat "$f")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

case $cmd in
  start)
    bin_dir=${3:?bin dir}
    version=${4:?version}
    certs
    cat >"$dir/env" <<ENV
KUBE_VERSION=$version
BIN_DIR=$bin_dir
ETCD_PORT=$(free_port)
ETCD_PEER_PORT=$(free_port)
API_PORT=$(free_port)
ENV
    # shellcheck disable=SC1091
    . "$dir/env"
    "$bin_dir/etcd" --data-dir "$dir/etcd" --name test \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster "test=http://127.0.0.1:$ETCD_PEER_PORT" \
      >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    for _ in $(seq 1 100); do
      curl -sf "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1 && break
      sleep 0.2
    done
    cat >"$dir/admin.kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: admin
clusters: [{name: real, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$dir/pki/ca.crt"}}]
contexts: [{name: admin, context: {cluster: real, user: admin}}]
users: [{name: admin, user: {client-certificate: "$dir/pki/admin.crt", client-key: "$dir/pki/admin.key"}}]
KC
    start_apiserver
    ;;
  restart)
    stop_pid "$dir/kube-apiserver.pid"
    start_apiserver
    ;;
  stop)
    stop_pid "$dir/kube-apiserver.pid"
    stop_pid "$dir/etcd.pid"
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
