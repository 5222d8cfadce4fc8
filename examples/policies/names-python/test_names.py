"""Unit tests of names.py in plain CPython: `python3 -m unittest test_names`."""

import json
import unittest

import names

ALICE = [("names", "Alice Smith, Bob")]


def request(*messages):
    return json.dumps({"model": "m", "temperature": 0.5, "messages": list(messages)})


def user(content):
    return {"role": "user", "content": content}


def answer(*contents):
    return json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": i, "message": {"role": "assistant", "content": c}, "finish_reason": "stop"}
                    for i, c in enumerate(contents)],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    })


def rewritten(verdict):
    if verdict[0] != "rewrite":
        raise AssertionError("expected a rewrite, got %r" % (verdict,))
    return verdict[1]


class Requests(unittest.TestCase):
    def test_names_in_every_message_are_redacted_whole_word_and_in_any_case(self):
        body = json.loads(rewritten(names.check_request(ALICE, request(
            {"role": "system", "content": "The customer is ALICE  smith."},
            user("Hi, I'm Alice Smith; my colleague bob says hello."),
            {"role": "assistant", "content": "Hello Bob!"},
        ))))
        self.assertEqual(
            [m["content"] for m in body["messages"]],
            ["The customer is [NAME].", "Hi, I'm [NAME]; my colleague [NAME] says hello.", "Hello [NAME]!"],
        )
        self.assertEqual(body["temperature"], 0.5, "everything else is left as it was")
        self.assertEqual(body["model"], "m")

    def test_parts_of_other_words_and_other_names_are_left_alone(self):
        for text in ["Bobby and Alice Smithson", "Bob_2 and bobcat", "Alice (no surname) Smith", "Jobob"]:
            self.assertEqual(names.check_request(ALICE, request(user(text))), names.ALLOW, text)

    def test_text_parts_are_redacted_and_other_parts_kept(self):
        parts = [
            {"type": "text", "text": "Ask Bob."},
            {"type": "image_url", "image_url": {"url": "https://example.com/bob.png"}},
            {"text": "Alice Smith too"},
        ]
        body = json.loads(rewritten(names.check_request(ALICE, request(user(parts)))))
        self.assertEqual(body["messages"][0]["content"], [
            {"type": "text", "text": "Ask [NAME]."},
            {"type": "image_url", "image_url": {"url": "https://example.com/bob.png"}},
            {"text": "[NAME] too"},
        ])

    def test_the_longest_name_wins_and_the_replacement_is_a_setting(self):
        settings = [("names", "Alice, Alice Smith , ,Zoë Ünal"), ("replacement", "<customer>")]
        body = json.loads(rewritten(names.check_request(settings, request(
            user("Alice Smith met alice and ZOË ÜNAL")))))
        self.assertEqual(body["messages"][0]["content"], "<customer> met <customer> and <customer>")
        self.assertIn("<customer>", rewritten(names.check_request([("names", "x"), ("replacement", "<customer>")],
                                                                  request(user("x")))))
        self.assertEqual(json.loads(rewritten(names.check_request(
            [("names", "Bob"), ("replacement", "")], request(user("hi Bob!")))))["messages"][0]["content"], "hi !")

    def test_regex_characters_in_a_name_are_literal(self):
        settings = [("names", "J. R. R. Tolkien, O'Brien")]
        body = json.loads(rewritten(names.check_request(settings, request(user("J. R. R. Tolkien and o'brien")))))
        self.assertEqual(body["messages"][0]["content"], "[NAME] and [NAME]")
        self.assertEqual(names.check_request(settings, request(user("JX RX RX Tolkien"))), names.ALLOW)

    def test_no_names_no_json_no_messages_all_pass(self):
        self.assertEqual(names.check_request([], request(user("Alice Smith"))), names.ALLOW)
        self.assertEqual(names.check_request([("names", " , ")], request(user("Alice Smith"))), names.ALLOW)
        self.assertEqual(names.check_request(ALICE, "Alice Smith"), names.ALLOW)
        self.assertEqual(names.check_request(ALICE, "{\"messages\": ["), names.ALLOW)
        self.assertEqual(names.check_request(ALICE, "null"), names.ALLOW)
        self.assertEqual(names.check_request(ALICE, json.dumps({"messages": [None, 3, {"content": 7}]})),
                         names.ALLOW)

    def test_non_ascii_text_stays_as_it_was(self):
        out = rewritten(names.check_request(ALICE, request(user("Grüße an Bob — 日本"))))
        self.assertIn("Grüße an [NAME] — 日本", out)


class Answers(unittest.TestCase):
    def test_every_choice_is_redacted(self):
        body = json.loads(rewritten(names.check_answer(ALICE, answer("Dear Alice Smith,", "Hi bob", None))))
        self.assertEqual([c["message"]["content"] for c in body["choices"]], ["Dear [NAME],", "Hi [NAME]", None])
        self.assertEqual(body["usage"]["total_tokens"], 7)

    def test_an_answer_without_names_passes(self):
        self.assertEqual(names.check_answer(ALICE, answer("Nothing to see")), names.ALLOW)
        self.assertEqual(names.check_answer(ALICE, "<html>"), names.ALLOW)
        self.assertEqual(names.check_answer(ALICE, json.dumps({"choices": [{"delta": {}}, 1]})), names.ALLOW)


class Streams(unittest.TestCase):
    def test_a_name_in_the_held_back_tail_waits_unless_it_is_the_last_call(self):
        self.assertEqual(names.check_stream(ALICE, "Please greet Alice Smith", False), names.ALLOW)
        self.assertEqual(rewritten(names.check_stream(ALICE, "Please greet Alice Smith warmly", True)),
                         "Please greet [NAME] warmly")
        # Far enough from the end, it cannot grow any more: rewritten now.
        tail = " " + "x" * names.HOLD_BACK
        self.assertEqual(rewritten(names.check_stream(ALICE, "Hi Bob" + tail, False)), "Hi [NAME]" + tail)
        self.assertEqual(names.check_stream(ALICE, "Hi Bob" + tail[:-4], False), names.ALLOW)

    def test_bob_at_the_end_may_become_bobby(self):
        self.assertEqual(names.check_stream(ALICE, "Say hi to Bob", False), names.ALLOW)
        self.assertEqual(names.check_stream(ALICE, "Say hi to Bobby", True), names.ALLOW)

    def test_a_stream_as_the_host_runs_it_never_releases_a_name(self):
        """Replays the host's hold-back loop (src/server/policy/stream.rs) over many splits."""
        text = ("Dear Alice Smith, thanks for your note. Bob and ALICE SMITH will call "
                "you tomorrow; Bobby will not. Regards, alice smith")
        expected = ("Dear [NAME], thanks for your note. [NAME] and [NAME] will call "
                    "you tomorrow; Bobby will not. Regards, [NAME]")
        for size in (1, 2, 3, 5, 7, 11, 16, 47, 48, 49, 200):
            released, held = [], ""
            pieces = [text[i:i + size] for i in range(0, len(text), size)]
            for n, piece in enumerate(pieces):
                last = n == len(pieces) - 1
                held += piece
                verdict = names.check_stream(ALICE, held, last)
                if verdict[0] == "rewrite":
                    held = verdict[1]
                if last:
                    released.append(held)
                    held = ""
                else:
                    cut = max(0, len(held) - names.HOLD_BACK)
                    released.append(held[:cut])
                    held = held[cut:]
            for chunk in released:
                self.assertNotIn("alice", chunk.lower(), size)
            self.assertEqual("".join(released), expected, size)


class Settings(unittest.TestCase):
    def test_helpers(self):
        self.assertEqual(names.setting([("a", "1"), ("a", "2")], "a"), "1")
        self.assertIsNone(names.setting([], "a"))
        self.assertEqual(names.comma_list(" x, y ,,z ,"), ["x", "y", "z"])
        self.assertTrue(names.settled("abcdef", 0, False, 5))
        self.assertFalse(names.settled("abcdef", 1, False, 5))
        self.assertTrue(names.settled("abcdef", 1, True, 5))

    def test_the_compiled_config_follows_the_settings(self):
        self.assertEqual(names.check_request([("names", "Carol")], request(user("Carol")))[0], "rewrite")
        self.assertEqual(names.check_request([("names", "Dave")], request(user("Carol"))), names.ALLOW)


if __name__ == "__main__":
    unittest.main()
