"""AppTest of the Memory page: defaults render; a 70B on one GPU points at the weights branch."""

from __future__ import annotations

from tests.apptest_tools import new_app, open_page, texts


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
    assert any("num_hidden_layers" in e.value for e in at.error)


def test_live_vllm_prefills_and_shows_measured_capacity():
    at = new_app().run()
    at.switch_page("pages/live.py").run()  # the demo source: a live vLLM with cache_config_info
    at.switch_page("pages/memory.py").run()
    assert not at.exception, at.exception
    assert any("Measured on the live server" in i.value for i in at.info)
    assert at.slider(key="mem_util").value == 0.9
