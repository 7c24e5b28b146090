-- wrk: GET with a bearer key from the environment (set by bench/run.ts).
wrk.headers["Authorization"] = "Bearer " .. os.getenv("KEY")
