from textstats import top_words, word_count


def test_word_count():
    assert word_count("the quick brown fox") == 4
    assert word_count("") == 0


def test_top_words_orders_by_count_then_word():
    text = "b a b c a b"
    assert top_words(text, 2) == [("b", 3), ("a", 2)]


def test_top_words_strips_punctuation():
    assert top_words("Hello, hello! World.") == [("hello", 2), ("world", 1)]
