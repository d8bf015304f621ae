"""The shape of each provider's call ids, as measured, for every test that holds ids to it.

Strategy: one table, read by the agent-loop suite's tests (``test_gate_loop``) and by
the tests of the backend suite's ids and each wire's own (``test_call_ids``), so that
both suites' scripted calls and the ids a wire answers ``tool-call`` with are held to
the same shape. Each row says where the shape was seen; real clients reject or
mishandle an id not shaped like their provider's.
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["ID_SHAPES", "OTHER_SHAPES", "id_shape"]

#: Each wire that scripts turns -> the shape of its provider's call ids; ``{name}`` is the
#: tool's name where the provider puts it in. Ollama's scripted turns carry no id at all
#: (results go back by name and order), so it has no row here.
ID_SHAPES: Mapping[str, str] = {
    # call_ and 24 letters and digits in every recording (pydantic-ai's
    # tests/models/cassettes/test_openai, vercel/ai's openai fixtures); Azure's are OpenAI's.
    "openai-chat": r"call_[A-Za-z0-9]{24}",
    "openai-responses": r"call_[A-Za-z0-9]{24}",
    "azure-openai-chat": r"call_[A-Za-z0-9]{24}",
    "azure-openai-responses": r"call_[A-Za-z0-9]{24}",
    # toolu_01 and 22 base-62: toolu_013nheddwxiFJt4C4Q8eGUXJ, toolu_01J9TjuPP5fxXpaFdH7zUe3S.
    "anthropic": r"toolu_01[A-Za-z0-9]{22}",
    # Claude's hosts put their infix after the type: toolu_vrtx_01SSt2KZd8fXU4dL7usyGrzJ,
    # toolu_bdrk_016sxE3nuDQagBag6z1wvhk5.
    "anthropic-vertex": r"toolu_vrtx_01[A-Za-z0-9]{22}",
    "bedrock-invoke": r"toolu_bdrk_01[A-Za-z0-9]{22}",
    # tooluse_ and 22 URL-safe base64: tooluse_hbTgdi0CSLq_hM4P8csZJA, tooluse_0-ZlzEmcRNaHuiNSnjVw7A.
    "bedrock-converse": r"tooluse_[A-Za-z0-9_-]{22}",
    # Gemini 3's functionCall.id: eight mixed-case letters and digits (whZntcQw, 96c1su3s in
    # simonw/llm-gemini's test_tools_with_gemini_3_thought_signatures.yaml); Vertex's are the same.
    "gemini": r"[A-Za-z0-9]{8}",
    "gemini-vertex": r"[A-Za-z0-9]{8}",
    # The tool's name, _, twelve lower-case letters and digits: currentTime_y46ar19t5gvw
    # (vercel/ai packages/cohere/src/__fixtures__/cohere-empty-tool-call.chunks.txt).
    "cohere": r"{name}_[a-z0-9]{12}",
}

#: The shapes of the other ids a wire may send with a call: a server's own where a wire
#: plays an OpenAI-compatible server, Ollama's, and the ids that name no client call.
OTHER_SHAPES: Mapping[str, str] = {
    # Mistral: nine letters and digits (gSIMJiOkT); Groq: nine lower-case letters and digits
    # (tk85n1k4m); DeepSeek: call_00_ and 24, the 00 the call's position (vercel/ai's
    # mistral-tool-call, groq-tool-call and deepseek-tool-call fixtures).
    "mistral": r"[A-Za-z0-9]{9}",
    "groq": r"[a-z0-9]{9}",
    "deepseek": r"call_\d{2}_[A-Za-z0-9]{24}",
    # Ollama 0.12+: call_ and eight lower-case letters and digits (call_hk81qg8b, call_wteop8bt).
    "ollama": r"call_[a-z0-9]{8}",
    # A server tool's call, which Anthropic's API runs itself: srvtoolu_01 and 22 base-62.
    "anthropic-server-tool": r"srvtoolu_01[A-Za-z0-9]{22}",
    # A Responses function_call item's own id, beside its call_id: fc_ and 50 hex.
    "openai-responses-item": r"fc_[0-9a-f]{50}",
}


def id_shape(wire: str, tool: str) -> str:
    """The pattern a whole call id of ``wire`` (or an :data:`OTHER_SHAPES` row) for ``tool`` matches."""
    shape = ID_SHAPES.get(wire) or OTHER_SHAPES[wire]
    return "^" + shape.replace("{name}", tool) + "$"
