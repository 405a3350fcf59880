"""Small text statistics used by the agent-runner pytest example."""


def word_count(text: str) -> int:
    return len(text.split())


def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for word in text.lower().split():
        word = word.strip(".,;:!?\"'")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
