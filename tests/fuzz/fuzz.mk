# tests/fuzz/fuzz.mk -- libFuzzer targets for every parser (included by the
# Makefile).  docs/fuzzing.md explains the targets and how to run them.
#
#   make fuzz-build            build every target in build-fuzz/
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="kineto nsys ..."]
#                              build, then run each target for FUZZ_SECONDS
#                              on its seed corpus (tests/fuzz/corpus/NAME/);
#                              exits 1 when any target found a crash, leak,
#                              timeout or OOM (saved as build-fuzz/crash-*)
#   make fuzz-regress          replay tests/fuzz/regress/ and the seed
#                              corpora through the sanitized targets
#   make fuzz-coverage         line coverage of the parsers reached by the
#                              corpora (build-fuzzcov/, llvm-cov report)
#   make fuzz-clean            remove build-fuzz/ and build-fuzzcov/
#
# Every run uses -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=128: an
# input of a few KB that makes a parser allocate over 128 MB at once is a
# finding (an amplification), as is one running 10 s.
#
# Needs clang 14 and libFuzzer: Debian packages clang and libclang-rt-14-dev
# (`make fuzz-deps`).  The library is compiled again with clang and
# -fsanitize=fuzzer-no-link,address,undefined in its own build directory
# (FUZZ_BUILD), so it never mixes with the gcc objects of build/.

FUZZ_CC ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= kineto nsys profile native lua-args chakra h5raw sched
FUZZ_DEB_PKGS := clang libclang-rt-14-dev
# LeakSanitizer's suppressions: libhdf5's own leaks on damaged files
# (tests/fuzz/lsan.supp says which and why).
export LSAN_OPTIONS := suppressions=$(CURDIR)/tests/fuzz/lsan.supp
# Per-run libFuzzer options (also used by fuzz-regress).
FUZZ_RUN_FLAGS ?= -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=128
# Longest input per target (bytes): large enough for the seeds, small enough
# that every execution stays in the milliseconds.
FUZZ_MAXLEN_kineto := 16384
FUZZ_MAXLEN_nsys := 4096
FUZZ_MAXLEN_profile := 8192
FUZZ_MAXLEN_native := 4096
FUZZ_MAXLEN_lua-args := 2048
FUZZ_MAXLEN_chakra := 16384
FUZZ_MAXLEN_h5raw := 16384
# h5raw's inputs may each spend up to a CPU second in io/h5open.h's child
# (its limit for a small file) before the refusal, twice for a file opened
# for writing: its wall-clock timeout allows for a loaded machine.
FUZZ_EXTRA_h5raw := -timeout=60
FUZZ_MAXLEN_sched := 8192

# The gcc build and this one cannot share a directory: their object rules
# would both claim $(FUZZ_BUILD)/%.o.
ifeq ($(BUILD),$(FUZZ_BUILD))
$(error BUILD=$(BUILD) is the libFuzzer build directory; pick another BUILD)
endif

FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
            -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -O1 -g $(FUZZ_SAN) $(WARN) -I. -I$(FUZZ_BUILD) \
               -I$(FUZZ_BUILD)/proto \
               -DJOULESIM_VERSION='"$(VERSION)"' \
               -DJOULESIM_GIT_REV='"$(GIT_REV)"' -DG_LOG_DOMAIN='"joulesim"'
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(LIB_SRC)) \
                $(FUZZ_BUILD)/resources.o \
                $(patsubst traces/%.proto,$(FUZZ_BUILD)/proto/%.pb-c.o,$(PROTO))
FUZZ_PROTO_C := $(patsubst traces/%.proto,$(FUZZ_BUILD)/proto/%.pb-c.c,$(PROTO))
FUZZ_BINS := $(patsubst %,$(FUZZ_BUILD)/fuzz-%,$(FUZZ_TARGETS))

.PHONY: fuzz fuzz-build fuzz-regress fuzz-deps fuzz-clean

fuzz-deps:
	@$(call install_debs,$(FUZZ_DEB_PKGS))

fuzz-build: $(FUZZ_BINS)

$(FUZZ_BUILD)/proto/%.pb-c.c $(FUZZ_BUILD)/proto/%.pb-c.h: traces/%.proto
	@mkdir -p $(FUZZ_BUILD)/proto
	protoc-c --proto_path=traces --c_out=$(FUZZ_BUILD)/proto $<
$(FUZZ_BUILD)/proto/%.pb-c.o: $(FUZZ_BUILD)/proto/%.pb-c.c | pkg-check
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -fsanitize=fuzzer-no-link \
	  -Wno-missing-prototypes -c $< -o $@
$(patsubst %.c,$(FUZZ_BUILD)/%.o,$(LIB_SRC)): | $(FUZZ_PROTO_C)

# The library: every object instrumented for coverage (fuzzer-no-link).
$(FUZZ_BUILD)/%.o: %.c | pkg-check
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -fsanitize=fuzzer-no-link \
	  -Wno-unused-variable -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/resources.c: lua/joulesim.gresource.xml $(RESOURCES)
	@mkdir -p $(FUZZ_BUILD)
	glib-compile-resources --sourcedir=lua --generate-source \
	  --c-name js_res --target=$@ $<
$(FUZZ_BUILD)/resources.o: $(FUZZ_BUILD)/resources.c | pkg-check
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -Wno-missing-prototypes \
	  -Wno-overlength-strings -c $< -o $@

# Known, reported, not ours to fix (docs/fuzzing.md "Open findings"):
# models/dvfs/perseus.c:1158 offsets prev_fin->data, NULL while the DP has
# no frontier nodes yet, by 0 (UB by the letter, harmless in practice).  It
# hits every js.perseus_frontier call, which would stop the lua-args
# target at once, so that one check is off for that one file until the
# owner fixes it (then delete this line).
$(FUZZ_BUILD)/models/dvfs/perseus.o: FUZZ_CFLAGS += -fno-sanitize=pointer-overflow

$(FUZZ_BUILD)/libjoulesim.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# A target: its LLVMFuzzerTestOneInput linked with libFuzzer's main.
$(FUZZ_BUILD)/fuzz-%: tests/fuzz/fuzz-%.c tests/fuzz/fuzz.h \
                      $(FUZZ_BUILD)/libjoulesim.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -fsanitize=fuzzer \
	  -o $@ $< $(FUZZ_BUILD)/libjoulesim.a $(PKG_LIBS) -lz -lm

# Each target runs FUZZ_SECONDS on a working corpus (build-fuzz/corpus/NAME,
# new inputs land there) seeded from tests/fuzz/corpus/NAME; findings are
# saved as build-fuzz/crash-NAME-{crash,leak,timeout,oom}-SHA1.  Every
# target runs even when an earlier one failed; the exit status is 1 when
# any did.
fuzz: fuzz-build
	@failed=""; \
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  dict=""; [ -f tests/fuzz/$$t.dict ] && dict="-dict=tests/fuzz/$$t.dict"; \
	  maxlen=""; extra=""; \
	  case $$t in \
	    kineto) maxlen=$(FUZZ_MAXLEN_kineto);; \
	    nsys) maxlen=$(FUZZ_MAXLEN_nsys);; \
	    profile) maxlen=$(FUZZ_MAXLEN_profile);; \
	    native) maxlen=$(FUZZ_MAXLEN_native);; \
	    lua-args) maxlen=$(FUZZ_MAXLEN_lua-args);; \
	    chakra) maxlen=$(FUZZ_MAXLEN_chakra);; \
	    h5raw) maxlen=$(FUZZ_MAXLEN_h5raw); extra=$(FUZZ_EXTRA_h5raw);; \
	    sched) maxlen=$(FUZZ_MAXLEN_sched);; \
	  esac; \
	  echo "== fuzz-$$t: $(FUZZ_SECONDS) s"; \
	  if ! G_SLICE=always-malloc G_DEBUG=gc-friendly \
	       $(FUZZ_BUILD)/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) \
	       $(FUZZ_RUN_FLAGS) $$extra -max_len=$$maxlen $$dict \
	       -print_final_stats=1 \
	       -artifact_prefix=$(CURDIR)/$(FUZZ_BUILD)/crash-$$t- \
	       $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	       >$(FUZZ_BUILD)/fuzz-$$t.log 2>&1; then \
	    failed="$$failed $$t"; \
	    echo "FAIL fuzz-$$t (log: $(FUZZ_BUILD)/fuzz-$$t.log)"; \
	    grep -E '^(==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' \
	      $(FUZZ_BUILD)/fuzz-$$t.log | head -20; \
	  else \
	    grep -E '^stat::(number_of_executed_units|peak_rss_mb)' \
	      $(FUZZ_BUILD)/fuzz-$$t.log | tr '\n' ' '; echo; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: findings in:$$failed"; exit 1; fi; \
	echo "fuzz: no findings"

# Replays the regression inputs and the seeds through the sanitized targets
# (libFuzzer runs each file once when given files).
fuzz-regress: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  files=$$(find tests/fuzz/regress/$$t tests/fuzz/corpus/$$t -type f \
	           2>/dev/null); \
	  [ -n "$$files" ] || continue; \
	  G_SLICE=always-malloc G_DEBUG=gc-friendly \
	    $(FUZZ_BUILD)/fuzz-$$t $(FUZZ_RUN_FLAGS) $$files \
	    >$(FUZZ_BUILD)/regress-$$t.log 2>&1 || \
	    { echo "FAIL fuzz-$$t (log: $(FUZZ_BUILD)/regress-$$t.log)"; exit 1; }; \
	  echo "ok   fuzz-$$t ($$(echo $$files | wc -w) inputs)"; \
	done

# Line coverage of the parsers reached by the corpora (working corpus and
# seeds): the targets built again with clang's source-based coverage in
# $(FUZZ_COV_BUILD), each run once over its inputs, then llvm-cov's report.
FUZZ_COV_BUILD ?= build-fuzzcov
FUZZ_COV_FILES := traces/kineto.c traces/kineto_events.c traces/nsys.c \
                  traces/chakra.c traces/import.c traces/import_select.c \
                  traces/import_host.c traces/import_build.c \
                  traces/profile.c traces/profile_nvml.c traces/native.c \
                  traces/native_write.c traces/info.c \
                  lua/bind.c lua/luautil.c lua/policy.c lua/gpu.c \
                  lua/trace.c lua/validate.c lua/pipeline.c lua/sweep.c \
                  run/inputs.c run/validate.c run/sweep_points.c \
                  run/sweep_wire.c
FUZZ_COV_FLAGS := -std=gnu11 -O1 -g -fprofile-instr-generate \
                  -fcoverage-mapping $(WARN) -Wno-unused-variable -I. \
                  -I$(FUZZ_BUILD) -I$(FUZZ_BUILD)/proto \
                  -DJOULESIM_VERSION='"$(VERSION)"' \
                  -DJOULESIM_GIT_REV='"$(GIT_REV)"' -DG_LOG_DOMAIN='"joulesim"'
.PHONY: fuzz-coverage
fuzz-coverage: $(FUZZ_PROTO_C) $(FUZZ_BUILD)/resources.c
	@mkdir -p $(FUZZ_COV_BUILD)
	@set -e; objs=""; \
	for f in $(LIB_SRC) $(FUZZ_PROTO_C) $(FUZZ_BUILD)/resources.c; do \
	  o=$(FUZZ_COV_BUILD)/$$(echo $$f | tr / _).o; \
	  if [ ! -f $$o ] || [ $$f -nt $$o ]; then \
	    $(FUZZ_CC) $(FUZZ_COV_FLAGS) $(PKG_CFLAGS) -Wno-missing-prototypes \
	      -Wno-overlength-strings -c $$f -o $$o; fi; \
	  objs="$$objs $$o"; done; \
	rm -f $(FUZZ_COV_BUILD)/*.profraw; \
	for t in $(FUZZ_TARGETS); do \
	  $(FUZZ_CC) $(FUZZ_COV_FLAGS) $(PKG_CFLAGS) -fsanitize=fuzzer \
	    -o $(FUZZ_COV_BUILD)/fuzz-$$t tests/fuzz/fuzz-$$t.c $$objs \
	    $(PKG_LIBS) -lz -lm; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  LLVM_PROFILE_FILE=$(CURDIR)/$(FUZZ_COV_BUILD)/$$t.profraw \
	    $(FUZZ_COV_BUILD)/fuzz-$$t -runs=0 -timeout=30 \
	    $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	    >$(FUZZ_COV_BUILD)/$$t.log 2>&1; \
	done; \
	llvm-profdata merge -o $(FUZZ_COV_BUILD)/all.profdata \
	  $(FUZZ_COV_BUILD)/*.profraw; \
	bins=""; for t in $(FUZZ_TARGETS); do \
	  if [ -z "$$bins" ]; then bins=$(FUZZ_COV_BUILD)/fuzz-$$t; \
	  else bins="$$bins -object $(FUZZ_COV_BUILD)/fuzz-$$t"; fi; done; \
	llvm-cov report $$bins -instr-profile=$(FUZZ_COV_BUILD)/all.profdata \
	  $(FUZZ_COV_FILES)

fuzz-clean:
	rm -rf $(FUZZ_BUILD) $(FUZZ_COV_BUILD)

-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
