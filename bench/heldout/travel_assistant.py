"""Held-out cases (travel_assistant): (text, event_type, entity_type, id, state, attributes).

Message time is 2026-12-02T10:00. Written before the 2026-12-02 accuracy work; not tuned on.
"""

CASES = [
    # --- trip_planned ---
    (
        "I'm planning a trip to Barcelona in March",
        "trip_planned",
        "Trip",
        None,
        "planned",
        {"destination": "Barcelona"},
    ),
    ("我打算下个月去西安玩", "trip_planned", "Trip", None, "planned", {"destination": "西安"}),
    (
        "Trip TR-55 to Oslo, budget 3000 euros",
        "trip_planned",
        "Trip",
        "TR-55",
        None,
        {"destination": "Oslo", "budget": 3000.0},
    ),
    ("We want to visit Vienna, trip TR-60", "trip_planned", "Trip", "TR-60", "planned", {"destination": "Vienna"}),
    (
        "计划去三亚度假，预算10000元",
        "trip_planned",
        "Trip",
        None,
        "planned",
        {"destination": "三亚", "budget": 10000.0},
    ),
    (
        "Thinking of a trip to Seoul next week, trip TR-61",
        "trip_planned",
        "Trip",
        "TR-61",
        "planned",
        {"destination": "Seoul"},
    ),
    # --- booking_made ---
    (
        "I booked a hotel in Milan, confirmation BK-3030",
        "booking_made",
        "Booking",
        "BK-3030",
        "confirmed",
        {"kind": "hotel"},
    ),
    ("机票订好了，预订号 BK-919", "booking_made", "Booking", "BK-919", "confirmed", {"kind": "机票"}),
    (
        "Reserved a train seat for Dec 15, booking BK-44",
        "booking_made",
        "Booking",
        "BK-44",
        "confirmed",
        {"date": "2026-12-15"},
    ),
    (
        "Booking BK-71 for trip TR-55 is confirmed, 200 dollars",
        "booking_made",
        "Booking",
        "BK-71",
        "confirmed",
        {"trip_id": "TR-55", "price": 200.0},
    ),
    ("我预订了明天的酒店，BK-620", "booking_made", "Booking", "BK-620", "confirmed", {"date": "2026-12-03"}),
    (
        "Booked a rental car with Sixt, reservation BK-512",
        "booking_made",
        "Booking",
        "BK-512",
        "confirmed",
        {"provider": "Sixt"},
    ),
    (
        "Flight for trip TR-60 booked, confirmation BK-61",
        "booking_made",
        "Booking",
        "BK-61",
        "confirmed",
        {"trip_id": "TR-60"},
    ),
    # --- booking_cancelled ---
    ("Please cancel booking BK-3030", "booking_cancelled", "Booking", "BK-3030", "cancelled", {}),
    ("我要取消预订号 BK-919 的机票", "booking_cancelled", "Booking", "BK-919", "cancelled", {}),
    ("The airline cancelled my flight BK-61", "booking_cancelled", "Booking", "BK-61", "cancelled", {}),
    ("Cancel BK-44, I won't travel", "booking_cancelled", "Booking", "BK-44", "cancelled", {}),
    ("酒店预订 BK-620 已取消", "booking_cancelled", "Booking", "BK-620", "cancelled", {}),
    ("not BK-71 but BK-72 should be cancelled", "booking_cancelled", "Booking", "BK-72", "cancelled", {}),
    # --- preference_stated ---
    ("I prefer aisle seats on long flights", "preference_stated", "Preference", None, None, {"value": "aisle seats"}),
    ("我喜欢住在市中心的酒店", "preference_stated", "Preference", None, None, {}),
    ("I like hotels with a pool", "preference_stated", "Preference", None, None, {"value": "hotels with a pool"}),
    ("Please remember I don't eat pork", "preference_stated", "Preference", None, None, {}),
    ("Traveler TV-8 prefers train over plane", "preference_stated", "Preference", None, None, {"traveler_id": "TV-8"}),
    ("我偏好早上的航班", "preference_stated", "Preference", None, None, {}),
    # --- travel_question ---
    ("What time does flight BK-61 board?", "travel_question", "Booking", "BK-61", None, {}),
    ("Which hotel is booked for trip TR-55?", "travel_question", "Trip", "TR-55", None, {}),
    ("行程 TR-60 一共几天？", "travel_question", "Trip", "TR-60", None, {}),
    ("Is booking BK-512 paid already?", "travel_question", "Booking", "BK-512", None, {}),
    ("我下周的酒店在哪里？", "travel_question", "Trip", None, None, {}),
    ("How much does trip TR-61 cost so far?", "travel_question", "Trip", "TR-61", None, {}),
]
