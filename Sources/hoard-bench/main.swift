print("hoard-bench: coming")
