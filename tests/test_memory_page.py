"""AppTest of the Memory page: defaults render; a 70B on one GPU points at the weights branch."""

from __future__ import annotations

from tests.apptest_tools import new_app, open_page, static_tables, texts


def memory_page():
    return open_page("pages/memory.py")


def test_default_model_fits():
    at = memory_page()
    assert "It fits" in texts(at)
    assert any(m.label == "KV capacity (tokens)" for m in at.metric)


def test_70b_on_one_gpu_points_at_weights():
    at = memory_page()
    at.selectbox(key="mem_model").set_value("llama-3.1-70b").run()
    body = texts(at)
    assert "It does not fit" in body and "memory.weights" in body
    assert "Weight quantization" in " ".join(link.proto.label for link in at.get("page_link"))


def test_pasted_config_error_is_specific():
    at = memory_page()
    at.selectbox(key="mem_model").set_value("__config__").run()
    at.text_area(key="mem_config").input('{"hidden_size": 4096}').run()
    assert not at.exception
    assert any("num_hidden_layers" in e.value.replace("\\", "") for e in at.error)  # shown Markdown-escaped


def test_live_vllm_prefills_and_shows_measured_capacity():
    at = new_app().run()
    at.switch_page("pages/live.py").run()  # the demo source: a live vLLM with cache_config_info
    at.switch_page("pages/memory.py").run()
    assert not at.exception, at.exception
    assert any("Measured on the live server" in i.value for i in at.info)
    assert at.slider(key="mem_util").value == 0.92  # the simulated vLLM 0.33 reports its default
    assert "Prefilled from the live server" in (at.slider(key="mem_util").help or "")


def test_70b_fp8_on_4_h100_fits_and_names_no_shortage_branch():
    at = memory_page()
    at.selectbox(key="mem_model").set_value("llama-3.1-70b").run()
    at.selectbox(key="mem_weights_dtype").set_value("fp8").run()
    at.selectbox(key="mem_tp").set_value(4).run()
    body = texts(at)
    assert not at.exception, at.exception
    assert "It fits" in body and "headroom" in body and "Branch" not in body
    assert "memory.weights" not in body and "memory.kv_cache" not in body
    assert at.query_params["model"] == "llama-3.1-70b" and at.query_params["tp"] == "4"


def test_inputs_come_from_the_url_and_steps_show_flags():
    at = open_page("pages/memory.py", model="llama-3.1-70b", weights="bf16", tp="1", gpu="h100")
    assert at.selectbox(key="mem_model").value == "llama-3.1-70b"
    assert "It does not fit" in texts(at)
    cells = " ".join(str(tb.to_dict()) for tb in static_tables(at))
    assert "--kv-cache-dtype fp8" in cells and "--tensor-parallel-size 2" in cells and "--quantization fp8" in cells


def test_all_numbers_is_a_table_with_units():
    at = memory_page()
    assert not any("KiB" in str(tb.value) for tb in at.table)  # lazy: nothing computed while it is closed
    at.session_state["mem_details"] = True  # the user opens "All numbers"
    at.run()
    values = " ".join(str(v) for tb in at.table for v in tb.value.iloc[:, 0])
    assert "GiB" in values and "KiB" in values and "ms" in values


def test_not_fitting_says_which_way_with_its_numbers():
    """Weights past the usable memory, a KV budget short of one sequence, and too much concurrency each get
    their own sentence with the per-GPU numbers, not one hedged 'the KV budget (or the weights alone)'."""
    weights = open_page("pages/memory.py", model="deepseek-v3", weights="fp8", tp="4", gpu="h100")
    said = " ".join(e.value for e in weights.error)
    assert "the weights alone take" in said and "GiB per GPU" in said and "(or the weights" not in said
    kv = open_page("pages/memory.py", model="llama-3.1-8b", len="32768", conc="256", gpu="h100")
    said = " ".join(e.value for e in kv.error)
    assert "GiB of KV cache per GPU" in said and "room for" in said, said


def test_kv_per_token_is_per_gpu_like_the_capacity_beside_it():
    """Llama-3.1-70B (80 layers × 8 KV heads × 128 × 2 × 2 bytes = 320 KiB a token) on TP 4: each GPU holds
    80 KiB of every token, and the capacity card is the per-GPU KV budget divided by that."""
    at = open_page("pages/memory.py", model="llama-3.1-70b", weights="fp8", tp="4", gpu="h100")
    card = next(m for m in at.metric if m.label == "KV per token per GPU")
    assert card.value == "80 KiB"


def test_a_gpu_from_the_link_is_used():
    """/memory?gpu=l4 sizes the deployment on an L4 (24 GB), not silently on the default H100."""
    at = open_page("pages/memory.py", gpu="l4")
    assert not at.exception, at.exception
    assert at.selectbox(key="mem_gpu").value == "l4" and not at.warning
    values = " ".join(str(v) for v in numbers(at))
    assert "22.03 GiB" in values  # the L4's CUDA total, not the H100's 79.19
    assert at.query_params["gpu"] == "l4"


def test_an_unknown_gpu_from_the_link_is_refused_out_loud():
    at = open_page("pages/memory.py", gpu="nope")
    assert not at.exception, at.exception
    said = " ".join(w.value for w in at.warning)
    assert "gpu=nope" in said and "not accepted" in said and "l4" in said and "mi300x" in said and "h100" in said
    assert at.selectbox(key="mem_gpu").value == "h100"


def test_out_of_range_numbers_are_refused_and_the_valid_ones_kept():
    at = open_page("pages/memory.py", len="-5", tp="999", util="7", conc="48", model="qwen3-32b")
    assert not at.exception, at.exception
    said = [w.value for w in at.warning]
    assert len(said) == 3, said
    text = " ".join(said)
    assert "len=-5" in text and "256 to 1,048,576" in text and "tp=999" in text and "1, 2, 4, 8, 16" in text
    assert "util=7" in text and "0.5 to 0.98" in text
    assert at.number_input(key="mem_concurrency").value == 48 and at.selectbox(key="mem_model").value == "qwen3-32b"
    assert at.number_input(key="mem_max_len").value == 8192 and at.selectbox(key="mem_tp").value == 1


def test_refusals_are_in_chinese_too():
    at = open_page("pages/memory.py", gpu="nope", lang="zh")
    assert any("gpu=nope" in w.value and "不被接受" in w.value for w in at.warning)


def numbers(at) -> list[str]:
    at.session_state["mem_details"] = True  # the user opens "All numbers"
    at.run()
    return [v for tb in at.table for v in tb.value.iloc[:, 0]]


def test_a_refused_value_is_quoted_as_typed():
    """The refused value, the accepted ones and the one used are escaped once, by t(): escaped twice (as they
    were) the warning read "gpu=rtx\\_9999" with a backslash the link never had."""
    import re

    at = open_page("pages/memory.py", gpu="rtx_9999")
    assert not at.exception, at.exception
    (said,) = [re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", w.value) for w in at.warning]  # as the Markdown reads
    assert "gpu=rtx_9999 is not accepted" in said and "\\" not in said, said
