# Plays a finished trace back as a live one, for bench/live_refresh.cpp (docs/VIEWER.md, "Live"):
# copies its first PREFIX bytes to DEST, holds flock(LOCK_EX) like the recorder, writes
# DEST.ready, waits for the file GO to exist, then appends CHUNK bytes every PERIOD seconds,
# COUNT times (or until the source ends), and closes (releasing the lock).
#
#   python3 bench/live_append.py SRC DEST PREFIX CHUNK PERIOD GO COUNT
import fcntl, os, sys, time
src, dest, prefix, chunk, period, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
with open(src, 'rb') as s, open(dest, 'wb') as d:
    fcntl.flock(d, fcntl.LOCK_EX)
    left = prefix
    while left:
        b = s.read(min(left, 64 << 20)); d.write(b); left -= len(b)
    d.flush()
    open(dest + '.ready', 'w').close()
    while not os.path.exists(go): time.sleep(0.05)
    n = 0
    while True:
        b = s.read(chunk)
        if not b: break
        d.write(b); d.flush(); n += 1
        print(f'{time.time():.2f} appended chunk {n}: {len(b)} bytes', flush=True)
        time.sleep(period)
        if n >= int(sys.argv[7]): break
