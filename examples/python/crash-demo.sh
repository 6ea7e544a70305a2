#!/usr/bin/env bash
# Durability demo: a worker is killed with SIGKILL in the middle of an
# order (while the carrier is being called), a second worker takes the order
# over and finishes it, and nothing already done (stock reserved, card
# charged) is done twice.
set -euo pipefail
source "$(dirname "$0")/common.sh"

setup
start_agent
ORDER="order-crash-$$"

say "worker 1 starts (its carrier calls are slow: SLOW_SHIPPING=30)"
# Stdin from a fifo kept open by this script: the worker runs until killed.
mkfifo "$WORK/worker1.in"
SLOW_SHIPPING=30 "$PY" "$APP" worker <"$WORK/worker1.in" >"$WORK/worker1.log" 2>&1 &
W1=$!
PIDS+=("$W1")
exec 7>"$WORK/worker1.in"
wait_for_line "$WORK/worker1.log" "worker ready" 60 "$W1"

say "a client places order $ORDER and waits for it"
"$PY" "$APP" place "$ORDER" widget 2 >"$WORK/client.log" 2>&1 &
CLIENT=$!
PIDS+=("$CLIENT")

wait_for_line "$WORK/worker1.log" "$ORDER: calling the carrier" 60 "$W1"
sed 's/^/    worker 1 | /' "$WORK/worker1.log"
say "kill -9 worker 1 (pid $W1) while it is shipping"
kill -9 "$W1"
wait "$W1" 2>/dev/null || true
exec 7>&-

say "worker 2 starts; the agent hands it the order with its recorded steps"
mkfifo "$WORK/worker2.in"
"$PY" "$APP" worker <"$WORK/worker2.in" >"$WORK/worker2.log" 2>&1 &
W2=$!
PIDS+=("$W2")
exec 8>"$WORK/worker2.in"

wait "$CLIENT"
sed 's/^/    worker 2 | /' "$WORK/worker2.log"
sed 's/^/    client   | /' "$WORK/client.log"

say "what the shop database says happened to $ORDER"
COUNTS="$("$PY" "$APP" report "$ORDER")"
echo "    $COUNTS"
EXPECTED="{\"$ORDER\": {\"reservations\": 1, \"charges\": 1, \"shipments\": 1, \"emails\": 1}}"
if [ "$COUNTS" != "$EXPECTED" ]; then
  echo "CRASH DEMO FAILED: expected $EXPECTED" >&2
  exit 1
fi
if grep -q "$ORDER: reserved\|$ORDER: charged" "$WORK/worker2.log"; then
  echo "CRASH DEMO FAILED: worker 2 repeated a recorded step" >&2
  exit 1
fi
exec 8>&-
show_workflows
echo
echo "CRASH DEMO OK: the order survived the kill; stock was reserved once and the card charged once"
