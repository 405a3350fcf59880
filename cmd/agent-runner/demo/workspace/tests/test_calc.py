import json
import os
import unittest

import calc


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)

    def test_mean(self):
        self.assertEqual(calc.mean([1, 2, 3]), 2)

    def test_mean_empty(self):
        with self.assertRaises(ValueError):
            calc.mean([])

    @classmethod
    def tearDownClass(cls):
        os.makedirs("reports", exist_ok=True)
        with open("reports/summary.json", "w") as f:
            json.dump({"module": "calc", "tests": 3}, f)


if __name__ == "__main__":
    unittest.main()
