#!/usr/bin/env bash
# A real single-node Kafka broker (KRaft: broker and controller in one JVM) for
# the Python binding's Kafka tests. Resolves the broker and its runtime
# dependencies with Maven (scripts/kafka/pom.xml) into build/kafka/lib once;
# later runs reuse that copy. Formats a fresh storage directory in a temp dir,
# starts the broker on free localhost ports, prints its bootstrap address
# (host:port) on stdout once it serves, and stops it and removes the temp dir
# when this script exits (SIGTERM, SIGINT or the broker's own death).
# Everything else (Maven, the broker's log on failure) goes to stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
POM="$ROOT/scripts/kafka/pom.xml"
LIB="$ROOT/build/kafka/lib"
STAMP="$ROOT/build/kafka/resolved.sha256"
START_TIMEOUT_SEC="${KAFKA_BROKER_START_TIMEOUT_SEC:-120}"

# Java 17+ and Maven, from the distribution when missing (as python-venv.sh
# installs python3-venv), so a fresh machine needs nothing beforehand.
if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
  echo "kafka-broker: installing Java and Maven with apt-get" >&2
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless maven >&2
fi

want="$(sha256sum "$POM" | cut -d' ' -f1)"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
  # A changed pom replaces the whole copy, so no stale jar stays on the class path.
  rm -rf "$LIB"
  mkdir -p "$LIB"
  mvn -B -q -f "$POM" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIB" >&2
  echo "$want" >"$STAMP"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/kafka-broker.XXXXXX")"
broker_pid=""
cleanup() {
  local code=$?
  if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
    kill -TERM "$broker_pid" 2>/dev/null || true
    # A controlled shutdown takes a few seconds; a broker that hangs is killed.
    for _ in $(seq 1 100); do
      kill -0 "$broker_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# Two free ports (client listener, controller listener; KAFKA_BROKER_PORT fixes
# the client's, for code that expects a known address) and a cluster id (16
# random bytes, base64url without padding, as Kafka's own tool makes them).
read -r port cport cluster_id < <(KAFKA_BROKER_PORT="${KAFKA_BROKER_PORT:-}" python3 - <<'PY'
import base64, os, socket, uuid
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
ports = [s.getsockname()[1] for s in socks]
for s in socks:
    s.close()
fixed = os.environ.get("KAFKA_BROKER_PORT")
print(int(fixed) if fixed else ports[0], ports[1], base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
PY
)

cat >"$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$work/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Every test uses fresh consumer groups; the 3 s default delays each one's first message.
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
PROPS

# A small heap and the client compiler: a test broker on a shared machine.
JAVA_OPTS=(-Xms128m -Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
  -Dorg.slf4j.simpleLogger.defaultLogLevel=info)
CP="$LIB/*"

# --cluster-id=: an id may begin with "-" (base64url), which argparse would
# take for an option after a separate -t.
java "${JAVA_OPTS[@]}" -cp "$CP" kafka.tools.StorageTool format \
  --cluster-id="$cluster_id" -c "$work/server.properties" >"$work/format.log" 2>&1 || {
  cat "$work/format.log" >&2
  exit 1
}

: >"$work/broker.log"
java "${JAVA_OPTS[@]}" -cp "$CP" kafka.Kafka "$work/server.properties" \
  >"$work/broker.log" 2>&1 &
broker_pid=$!

# Serving once the broker logs that it started (the listener alone opens
# before the metadata log is ready).
deadline=$((SECONDS + START_TIMEOUT_SEC))
until grep -q 'Kafka Server started' "$work/broker.log"; do
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    echo "kafka-broker: the broker exited during start; its log:" >&2
    cat "$work/broker.log" >&2
    exit 1
  fi
  if ((SECONDS >= deadline)); then
    echo "kafka-broker: not started after ${START_TIMEOUT_SEC}s; its log:" >&2
    tail -50 "$work/broker.log" >&2
    exit 1
  fi
  sleep 0.1
done

echo "127.0.0.1:$port"
# Until the broker dies or this script is told to stop (the traps above).
wait "$broker_pid"
