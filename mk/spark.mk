# Spark (strata.spark): PySpark's JVM needs a Java runtime. `java -version` is checked first and
# Debian's default-jre-headless installed only where no Java is found; pyspark[sql] and
# pandas < 3 come with the venv (the `spark` extra, part of `all`).
.PHONY: java bench-spark

java: ## a Java runtime for PySpark, where missing
	@java -version >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless \
	    >/dev/null; }
	@java -version 2>&1 | head -1

test: java

# Batch read of 1,000,000 records of 100 bytes through format("strata"), beside spark.range.
bench-spark: $(STAMP) java ## batch read of 1,000,000 records through format("strata") beside spark.range
	$(BIN)/python -m bench.spark_read

bench: bench-spark
