from dlmcost import api  # the typed results the CLI renders
a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme="dual-cache", gen=256, block=32, tpf=3)
print(a.results[0].gpu, round(a.results[0].tokens_per_s, 1), a.results[0].verdict)
s = api.sweep("JetLM/SDAR-4B-Chat", gpus="h100", blocks=[4, 16, 64], batches=[1, 32])
best = max((r for r in api.sweep_rows(s) if r["scheme"] == "block"), key=lambda r: r["tokens_per_s"])
print("block", best["block"], "batch", best["batch"], round(best["tokens_per_s"]), "tok/s")
