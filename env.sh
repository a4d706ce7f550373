export PYTHONPATH=/work/wt/speed:/work/wt/speed/verifier
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/wt_speed
export TEST_REDIS_URL=redis://127.0.0.1:6379/13
export CI=true
cd /work/wt/speed
