# joulesim -- build, test, run.  See README.md.
#
#   make deps     install the Debian packages the build needs (when missing)
#   make          build ./joulesim (one self-contained binary)
#   make run      deps + build + the quickstart scenario (+ figures when
#                 python3-h5py is installed)
#   make plot-deps  install python3-h5py, -matplotlib, -pandas (scenarios/plot.py)
#   make test     deps + build + every test; ends with "N passed, N failed"
#   make asan     build and test under AddressSanitizer + UBSan (build-asan/)
#   make fuzz     libFuzzer targets, FUZZ_SECONDS=N each (tests/fuzz/fuzz.mk)
#   make install  PREFIX=/usr/local (the binary, scenarios, the fidelity
#                 script (tools/fidelity.lua), docs, and the
#                 data they find beside it in PREFIX/share/joulesim/data)

PREFIX ?= /usr/local
CC ?= cc
PKGS := glib-2.0 gio-2.0 hdf5 lua5.4 yajl sqlite3 libprotobuf-c
DEB_PKGS := libglib2.0-dev libglib2.0-dev-bin libhdf5-dev liblua5.4-dev \
            zlib1g-dev pkg-config libyajl-dev libsqlite3-dev \
            libprotobuf-c-dev protobuf-c-compiler
# MPI=1: the MPI variant (Open MPI + parallel HDF5, -DJOULESIM_MPI) in its
# own build dir; the default build is serial and needs none of it.  See
# docs/sweeps.md "Sweeps on a cluster (MPI)".  `make mpi-deps` installs it.
MPI_DEB_PKGS := openmpi-bin libopenmpi-dev libhdf5-openmpi-dev

# $(call install_debs,PKGS): apt-get installs those of the Debian packages
# PKGS that dpkg does not list as installed (through sudo unless root);
# nothing when all are there.  Used by deps, plot-deps, mpi-deps and
# fuzz-deps.
define install_debs
missing=""; for p in $(1); do \
  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
if [ -n "$$missing" ]; then \
  echo "installing:$$missing"; \
  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
  $$SUDO apt-get update && $$SUDO apt-get install -y $$missing; \
fi
endef
ifeq ($(MPI),1)
PKGS := $(filter-out hdf5,$(PKGS)) hdf5-openmpi ompi-c
BUILD ?= build-mpi
BIN ?= joulesim-mpi
override CFLAGS += -DJOULESIM_MPI
else
# Explicit: with libhdf5-openmpi-dev installed, plain `hdf5` may be MPI's.
PKGS := $(patsubst hdf5,hdf5-serial,$(PKGS))
endif
.DEFAULT_GOAL := all
.PHONY: mpi-deps
mpi-deps:
	@$(call install_debs,$(MPI_DEB_PKGS))

BUILD ?= build
BIN ?= joulesim

VERSION := 0.1.0
GIT_REV := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

# pkg-config runs once per make.  A package it cannot find is not an error
# here (`make test` parses this file before `make deps` has installed
# anything, then builds in a fresh make): pkg-check, which every compile
# waits for, fails naming the missing packages.
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
PKG_MISSING := $(shell for p in $(PKGS); do \
                 pkg-config --exists $$p 2>/dev/null || echo $$p; done)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wno-unused-parameter
OPT ?= -O2 -g
override CFLAGS += -std=gnu11 $(OPT) $(WARN) -I. -I$(BUILD) -I$(BUILD)/proto \
        $(PKG_CFLAGS) \
        -DJOULESIM_VERSION='"$(VERSION)"' -DJOULESIM_GIT_REV='"$(GIT_REV)"' \
        -DG_LOG_DOMAIN='"joulesim"'
override LDLIBS += $(PKG_LIBS) -lz -lm

# The library: every room but cli/ (docs/architecture.md, "The rooms").
LIB_SRC := $(wildcard io/*.c sim/*.c models/*.c models/dvfs/*.c traces/*.c \
             run/*.c lua/*.c)
# The command line: main.c and one file per command, linked into $(BIN) only.
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRC))
# Protocol buffer schemas (traces/*.proto) compile to C with protoc-c.
PROTO := $(wildcard traces/*.proto)
PROTO_C := $(patsubst traces/%.proto,$(BUILD)/proto/%.pb-c.c,$(PROTO))
LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC)) $(BUILD)/resources.o \
           $(PROTO_C:.c=.o)
TEST_SRC := $(wildcard tests/test-*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
RESOURCES := $(wildcard lua/*.lua)

.PHONY: all deps plot-deps run test check-layering asan install clean unit-tests \
        pkg-check

all: $(BIN)

deps:
	@$(call install_debs,$(DEB_PKGS))

# scenarios/plot.py's Python packages (Debian's, not pip's).
PLOT_DEB_PKGS := python3-h5py python3-matplotlib python3-pandas
plot-deps:
	@$(call install_debs,$(PLOT_DEB_PKGS))

pkg-check:
	@$(if $(PKG_MISSING),$(error pkg-config cannot find $(PKG_MISSING): \
	  `make deps` installs the build's packages$(if $(filter 1,$(MPI)), \
	  and `make mpi-deps` those of MPI=1)),:)

$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: traces/%.proto
	@mkdir -p $(BUILD)/proto
	protoc-c --proto_path=traces --c_out=$(BUILD)/proto $<
$(BUILD)/proto/%.pb-c.o: $(BUILD)/proto/%.pb-c.c | pkg-check
	$(CC) $(CFLAGS) -Wno-missing-prototypes -c $< -o $@
# Every object may include generated protobuf headers.
$(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC) $(CLI_SRC)): | $(PROTO_C)

$(BUILD)/%.o: %.c | pkg-check
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# Stricter warnings, room by room, for the rooms that build clean with them.
STRICT_WARN := -Wconversion -Wundef -Wwrite-strings
$(BUILD)/sim/%.o $(BUILD)/io/%.o: override CFLAGS += $(STRICT_WARN)
$(BUILD)/traces/native.o $(BUILD)/traces/native_write.o \
  $(BUILD)/traces/info.o $(BUILD)/traces/timeline.o: \
  override CFLAGS += $(STRICT_WARN)

# The Lua prelude (and any other embedded text) as a GResource.
$(BUILD)/resources.c: lua/joulesim.gresource.xml $(RESOURCES)
	@mkdir -p $(BUILD)
	glib-compile-resources --sourcedir=lua --generate-source \
	  --c-name js_res --target=$@ $<
$(BUILD)/resources.o: $(BUILD)/resources.c | pkg-check
	$(CC) $(CFLAGS) -Wno-missing-prototypes -Wno-overlength-strings -c $< -o $@

$(BUILD)/libjoulesim.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(BUILD)/libjoulesim.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libjoulesim.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-missing-prototypes -o $@ $< $(BUILD)/libjoulesim.a $(LDLIBS)

# The replay of the fuzzers' inputs includes the fuzz targets' sources.
$(BUILD)/tests/test-fuzz-regress: $(wildcard tests/fuzz/*.c tests/fuzz/*.h)

run: deps
	$(MAKE) joulesim
	./joulesim run scenarios/quickstart.lua
	@if /usr/bin/python3 -c 'import h5py, matplotlib' 2>/dev/null; then \
	  /usr/bin/python3 scenarios/plot.py results.h5 -o figures && \
	  echo "figures: $(CURDIR)/figures/"; \
	elif /usr/bin/python3 -c 'import h5py' 2>/dev/null; then \
	  echo "figures: run 'make plot-deps' (installs matplotlib), then" \
	       "'python3 scenarios/plot.py results.h5 -o figures'"; \
	fi

unit-tests: $(BIN) $(TEST_BIN)

test: deps
	$(MAKE) unit-tests
	@$(MAKE) --no-print-directory check-layering
	@tests/run-tests.sh $(BUILD)/tests ./$(BIN)

# The rooms' order (docs/architecture.md): a room includes only from the
# rooms left of it, and itself.
#   io  <-  sim  <-  models  <-  traces  <-  run  <-  lua  <-  cli
# tests/ may include any room but lua/ (the C tests simulate through run/),
# except the tests of the binding itself (TESTS_OF_LUA).
check-layering:
	@tests/check-layering.sh

# LSAN_OPTIONS: libhdf5's own leaks on damaged files (tests/fuzz/lsan.supp).
# G_SLICE=always-malloc: GLib 2.74 takes lists, arrays and strings from its
# slice allocator, which LeakSanitizer cannot see; with malloc it sees them.
# fast_unwind_on_malloc=0 unwinds through GLib's frames (built without frame
# pointers), so a leak report names the joulesim caller.
asan:
	$(MAKE) BUILD=build-asan BIN=joulesim-asan \
	  OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	  LDLIBS="-fsanitize=address,undefined" unit-tests
	G_SLICE=always-malloc G_DEBUG=gc-friendly \
	  ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  tests/run-tests.sh build-asan/tests ./joulesim-asan

# The data the scenarios and `joulesim fidelity` find beside an installed
# binary (PREFIX/share/joulesim/data): the measured cases, the stage
# profiles, the published tables and the Kineto traces fidelity replays.
INSTALL_DATA := $(wildcard tests/data/measured/README.md \
  tests/data/measured/*/*.csv tests/data/profiles/*.csv \
  tests/data/published/README.md tests/data/published/*.csv) \
  $(addprefix tests/data/traces/,a100_2rank_nccl_rank0.json.gz \
    sampled_world128_rank0.json.gz sampled_world128_rank1.json.gz)

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/joulesim/scenarios \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/$(BIN)
	install -m 644 scenarios/*.lua scenarios/plot.py \
	  $(DESTDIR)$(PREFIX)/share/joulesim/scenarios/
	install -D -m 644 tools/fidelity.lua \
	  $(DESTDIR)$(PREFIX)/share/joulesim/tools/fidelity.lua
	for f in $(INSTALL_DATA); do \
	  install -D -m 644 $$f \
	    $(DESTDIR)$(PREFIX)/share/joulesim/data/$${f#tests/data/} || exit 1; \
	done
	install -d $(DESTDIR)$(PREFIX)/share/doc/joulesim
	install -m 644 README.md docs/*.md docs/fidelity-record.csv $(DESTDIR)$(PREFIX)/share/doc/joulesim/
	install -m 644 docs/joulesim.1 $(DESTDIR)$(PREFIX)/share/man/man1/joulesim.1

clean:
	rm -rf build build-asan build-mpi build-fuzz build-fuzzcov joulesim \
	  joulesim-asan joulesim-mpi results.h5 figures

# libFuzzer targets (make fuzz FUZZ_SECONDS=N): tests/fuzz/fuzz.mk.
-include tests/fuzz/fuzz.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
