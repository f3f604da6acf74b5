#!/bin/sh
# The example's worker: a line a second, a coloured one among them, and every 20 s a
# Python traceback on stderr (Corral's alert scanner reports it as an error).
i=0
while :; do
  i=$((i + 1))
  echo "worker: polled queue jobs (batch $i, $((i % 7)) pending)"
  printf '\033[32mINFO\033[0m  worker: sent \033[1m%d\033[0m e-mails in %dms\n' $((i % 5 + 1)) $((i * 37 % 400 + 12))
  if [ $((i % 20)) -eq 3 ]; then
    printf 'Traceback (most recent call last):\n  File "worker.py", line 41, in <module>\n    main()\n  File "worker.py", line 12, in handle\n    user = users[record["id"]]\nKeyError: %s\n' "'user-$i'" >&2
  fi
  sleep 1
done
